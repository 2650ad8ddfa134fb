"""The live layer: API access (client), the kinds desched reads (resources), informer caches and
the per-cycle ClusterSnapshot built from them (informer), and `desched snapshot` (capture).

Entry points:
- capture.run_capture(kubeconfig, context, out) -> int: `desched snapshot`, synchronous.
- client.ApiClient.from_config(kubeconfig, context): one API server connection.
- informer.make_informers(client, kinds), start_informers(informers), build_snapshot(informers),
  stop_informers(informers): the caches behind `desched run`.
"""
