"""The Python `kubernetes` client (PyPI) against the embedded API server.

Run by tests/python_client.rs with the server's kubeconfig as argv[1]; the
server keeps only a short watch history so that a 410 can be provoked.
Exits non-zero (with the failed assertion) on any deviation.
"""
import sys
import threading

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

config.load_kube_config(config_file=sys.argv[1])
co = client.CustomObjectsApi()
core = client.CoreV1Api()
G, V, P, NS = "test.mpiswarm.io", "v1", "widgets", "default"


def widget(name, size):
    return {"apiVersion": f"{G}/{V}", "kind": "Widget", "metadata": {"name": name}, "spec": {"size": size}}


created = co.create_namespaced_custom_object(G, V, NS, P, widget("py1", 2))
assert created["spec"]["color"] == "blue", created
assert created["metadata"]["generation"] == 1, created

listed = co.list_namespaced_custom_object(G, V, NS, P)
assert [i["metadata"]["name"] for i in listed["items"]] == ["py1"], listed
rv = listed["metadata"]["resourceVersion"]
assert rv, listed

events = []
w = watch.Watch()


def follow():
    for ev in w.stream(co.list_namespaced_custom_object, G, V, NS, P, resource_version=rv, timeout_seconds=60):
        events.append((ev["type"], ev["object"]["metadata"]["name"]))
        if ev["type"] == "DELETED":
            w.stop()


t = threading.Thread(target=follow)
t.start()
co.create_namespaced_custom_object(G, V, NS, P, widget("py2", 1))
co.patch_namespaced_custom_object(G, V, NS, P, "py1", {"spec": {"size": 3}})
co.delete_namespaced_custom_object(G, V, NS, P, "py1")
t.join(60)
assert not t.is_alive(), "watch did not see the DELETED event"
assert events == [("ADDED", "py2"), ("MODIFIED", "py1"), ("DELETED", "py1")], events

try:
    co.create_namespaced_custom_object(G, V, NS, P, widget("huge", 1000))
    raise AssertionError("an invalid widget was accepted")
except ApiException as e:
    assert e.status == 422 and "spec.size" in e.body, (e.status, e.body)

# Core kinds and the core view of events deserialize into the typed models.
core.create_namespaced_config_map(NS, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cm1"), data={"a": "b"}))
assert core.read_namespaced_config_map("cm1", NS).data == {"a": "b"}
core.list_namespaced_event(NS)

# Push the watch history past the first resourceVersions, then ask for one.
for i in range(40):
    core.patch_namespaced_config_map("cm1", NS, {"data": {"n": str(i)}})
try:
    for _ in watch.Watch().stream(co.list_namespaced_custom_object, G, V, NS, P, resource_version="1", timeout_seconds=10):
        pass
    raise AssertionError("a watch from a compacted resourceVersion did not fail")
except ApiException as e:
    assert e.status == 410, (e.status, e.reason)
    assert "too old resource version" in str(e), str(e)

print("python client: ok")
