"""The SQS endpoint under load: ``durableq serve`` beside the server it replaced and moto_server.

``python -m bench.endpoint`` runs it alone (the same report as every workload);
``python -m bench`` runs it as workload W9.  What it measures:

- throughput and p50/p99 latency of SendMessage, ReceiveMessage, DeleteMessage
  and a full cycle, with 1, 16 and 128 clients (one keep-alive connection each);
- the wake-up latency of 1,000 idle long polls when one message arrives;
- the server's memory per idle connection;
- capacity: 2,000 waiting long polls and 500 slow clients, and 16 clients
  cycling messages beside them;
- which HTTP stack (uvicorn with h11 or httptools, asyncio or uvloop) is needed
  to be at least as fast as the old server.

The old server is the ``http.server`` endpoint of commit d3c9a62, run from a
temporary ``git worktree`` of this repository (never kept in the package).
Clients speak AWS JSON 1.0 over raw asyncio connections from one process, the
same client for every server, so the client costs little and the same for all.
"""
