"""The live layer, everything that talks to the API server: API access (client), informer caches
and the per-cycle ClusterSnapshot built from them (informer), `desched snapshot` (capture) and
`desched run` (run), with what the loop drives: evictions (eviction_api), PodMigrationJobs
(migration), leases (leader), events, metrics and its HTTP listeners. The kinds desched reads
are listed in model/resources.py, below this layer, for the snapshot loader too.

Entry points:
- capture.run_capture(kubeconfig, context, out) -> int: `desched snapshot`, synchronous.
- client.ApiClient.from_config(kubeconfig, context): one API server connection.
- informer.make_informers(client, kinds), start_informers(informers), build_snapshot(informers),
  stop_informers(informers): the caches behind `desched run`.
- run.run_command(config): `desched run`.
"""
