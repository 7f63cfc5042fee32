"""A framework written with mesoshttp (PyPI, a Mesos v1 scheduler client
nobody here wrote) runs a DOCKER task through the offer layer on the real
mpiswarm agent: `sleep 5` in the image given, then it tears down.

Usage: python3 mesoshttp_docker.py MASTER_URL IMAGE TASK_ID
Prints one JSON object: the states seen, the agent id, any errors.
"""
import json
import sys
import threading

from mesoshttp.client import MesosClient

url, image, task_id = sys.argv[1:4]
seen = {"states": [], "messages": [], "errors": []}
done = threading.Event()
client = MesosClient(mesos_urls=[url], frameworkName="mesoshttp-docker", max_reconnect=1)
client.set_role("mpi")
launched = []


def on_offers(offers):
    for offer in offers:
        if launched:
            offer.decline()
            continue
        agent = offer.get_offer()["agent_id"]["value"]
        seen["agent_id"] = agent
        offer.accept([{
            "name": "sleep-5",
            "task_id": {"value": task_id},
            "agent_id": {"value": agent},
            "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
                          {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}}],
            "command": {"shell": True, "value": "sleep 5"},
            "container": {"type": "DOCKER", "docker": {"image": image}},
        }])
        launched.append(agent)


def on_update(update):
    status = update["status"]
    seen["states"].append(status["state"])
    seen["messages"].append(status.get("message", ""))
    if status["state"] in ("TASK_FINISHED", "TASK_FAILED", "TASK_LOST", "TASK_ERROR", "TASK_KILLED"):
        client.stop = True
        done.set()


client.on(MesosClient.OFFERS, on_offers)
client.on(MesosClient.UPDATE, on_update)
client.on(MesosClient.ERROR, lambda message: seen["errors"].append(message))
threading.Thread(target=client.register, daemon=True).start()
finished = done.wait(120)
print(json.dumps(seen))
sys.exit(0 if finished else 1)
