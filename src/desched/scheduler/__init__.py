"""A small model of kube-scheduler, used to place recreated pods in `simulate --reschedule`."""
