"""Drives the offer layer with mesoshttp (PyPI), a Mesos v1 scheduler API
client nobody here wrote: subscribe, take an offer, launch a task on the
test agent, see TASK_RUNNING and TASK_FINISHED, acknowledge (mesoshttp
acknowledges every update that carries a uuid), then tear down.

Usage: python3 mesoshttp_driver.py MASTER_URL
Prints one JSON line with what happened; exits non-zero on failure.
"""
import json
import logging
import sys
import threading

from mesoshttp.client import MesosClient

TIMEOUT_SECONDS = 60


class Driver:
    def __init__(self, url):
        self.client = MesosClient(mesos_urls=[url], frameworkName="mesoshttp-test", max_reconnect=1)
        # mesoshttp sends the deprecated FrameworkInfo.role, without MULTI_ROLE.
        self.client.set_role("mpi")
        self.client.on(MesosClient.SUBSCRIBED, self.subscribed)
        self.client.on(MesosClient.OFFERS, self.offers)
        self.client.on(MesosClient.UPDATE, self.update)
        self.client.on(MesosClient.ERROR, self.error)
        self.result = {"states": [], "errors": []}
        self.launched = False
        self.done = threading.Event()

    def subscribed(self, driver):
        self.result["framework_id"] = driver.frameworkId
        self.result["master_version"] = (self.client.get_master_info() or {}).get("version")

    def offers(self, offers):
        for offer in offers:
            if self.launched:
                offer.decline()
                continue
            o = offer.get_offer()
            self.result["offer_hostname"] = o["hostname"]
            self.result["offer_cpus"] = sum(r["scalar"]["value"] for r in o["resources"] if r["name"] == "cpus")
            task = {
                "name": "py-task",
                "task_id": {"value": "py-task-1"},
                "agent_id": {"value": o["agent_id"]["value"]},
                "resources": [
                    {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.5}},
                    {"name": "mem", "type": "SCALAR", "scalar": {"value": 64}},
                ],
                "command": {"shell": True, "value": "true"},
            }
            offer.accept([task])
            self.launched = True

    def update(self, update):
        status = update["status"]
        self.result["states"].append(status["state"])
        if status["state"] in ("TASK_FINISHED", "TASK_FAILED", "TASK_LOST", "TASK_ERROR"):
            self.client.stop = True
            self.done.set()

    def error(self, message):
        self.result["errors"].append(message)


def main():
    logging.basicConfig(level=logging.WARNING)
    driver = Driver(sys.argv[1])
    thread = threading.Thread(target=driver.client.register, daemon=True)
    thread.start()
    finished = driver.done.wait(TIMEOUT_SECONDS)
    # register() returns after the next event, once it has sent TEARDOWN.
    thread.join(TIMEOUT_SECONDS)
    print(json.dumps(driver.result))
    return 0 if finished and driver.result["states"][-1:] == ["TASK_FINISHED"] else 1


if __name__ == "__main__":
    sys.exit(main())
