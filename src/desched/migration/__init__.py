"""Koordinator's pod migration (reference/koordinator.md §6): the workload limits and their
rounding, the arbitration filter pipeline and ordering, the object limiters and the eviction
policies. The MigrationController plugin (desched.plugins.migrationcontroller) puts them together
for simulation; the live PodMigrationJob controller will reuse them."""
