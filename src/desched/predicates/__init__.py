"""Scheduling predicates shared by nodeFit, the plugins and the scheduler model."""
