"""Koordinator's pod migration (docs/migration.md): the workload limits and their
rounding, the arbitration filter pipeline and ordering, the object limiters and the eviction
policies. The MigrationController plugin (desched.plugins.migrationcontroller) puts them together
for simulation; the live PodMigrationJob controller will reuse them."""
