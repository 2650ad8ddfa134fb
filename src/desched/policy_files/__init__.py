"""Policy files: upstream DeschedulerPolicy (v1alpha2, v1alpha1), Koordinator
DeschedulerConfiguration, or a ConfigMap wrapping either."""
