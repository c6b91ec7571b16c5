"""What Vigil's tests and benchmarks share: the agent run and scraped (agent), two network
namespaces on a veth pair (netns), Prometheus and Alertmanager on loopback (stack), the stuck-rank
alert's pages (rank_stuck_pages), the dashboards' queries (dashboard_queries), the worker's OpenAI API
(worker_client), a worker tensor-parallel group in those namespaces (tp_group), a witness of the kernel's
TCP retransmit events beside the agent's programs (tcp_witness), free ports (ports), waiting
for a condition (wait) and the one way a check fails (fail). On PYTHONPATH from CTest
(tests/CMakeLists.txt) and from bench/run.sh."""
