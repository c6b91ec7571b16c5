"""What Vigil's tests and benchmarks share: the agent run and scraped (agent), two network
namespaces on a veth pair (netns), Prometheus and Alertmanager on loopback (stack), the dashboards'
queries (dashboard_queries), the worker's OpenAI API (worker_client), free ports (ports), waiting
for a condition (wait) and the one way a check fails (fail). On PYTHONPATH from CTest
(tests/CMakeLists.txt) and from bench/run.sh."""
