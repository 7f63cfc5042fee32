"""mesoshttp (PyPI, a Mesos v1 scheduler client nobody here wrote) given
the offer layer's replicas: it subscribes through the first (a standby
sends it on to the leader), takes offers, and when its leader dies it
subscribes again with its framework id and takes offers from the next
leader. It declines every offer (refused for half a second).

Usage: python3 mesoshttp_failover.py URL[,URL...]
Prints one JSON object per line: {"subscribed": URL, "framework_id": ID}
each time it is subscribed (URL: where mesoshttp sends its calls; requests,
under it, follows a standby's 307 to the leader), and
{"offers_from": MASTER_ID, "via": URL} at the first offer of each master
(an offer id is MASTER_ID-ONNNN). Runs until killed.
"""
import json
import sys

from mesoshttp.client import MesosClient

# Seconds mesoshttp waits before it subscribes again after a lost stream
# (10 by default): a leader change should not cost that much.
MesosClient.WAIT_TIME = 1

urls = sys.argv[1].split(",")
client = MesosClient(mesos_urls=urls, frameworkName="mesoshttp-failover", max_reconnect=1000)
client.set_role("mpi")
client.set_failover_timeout(3600)
masters = set()


def say(**fields):
    print(json.dumps(fields), flush=True)


def on_subscribed(driver):
    say(subscribed=client.mesos_url, framework_id=driver.frameworkId)


def on_offers(offers):
    for offer in offers:
        master = offer.get_offer()["id"]["value"].rsplit("-", 1)[0]
        if master not in masters:
            masters.add(master)
            say(offers_from=master, via=client.mesos_url)
        offer.decline({"filters": {"refuse_seconds": 0.5}})


client.on(MesosClient.SUBSCRIBED, on_subscribed)
client.on(MesosClient.OFFERS, on_offers)
client.register()
