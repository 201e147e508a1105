"""A launcher that starts helper services and one-shot jobs on a cluster (RAY072 temporary-actor-handle,
RAY077 unobserved-task-result).

Reported: a named registry created without keeping its handle, an actor created and dropped at once,
a method call on a temporary actor that starts a thread and returns, a fire-and-forget call on a
temporary actor, and task refs that are thrown away (bare, or bound to a name never read).
Silent: a detached service, a kept handle, a one-shot actor whose result is fetched, calls to
kept actors, a `num_returns=0` task, and refs that are waited on.
"""

import shutil
import threading
import time

import ray
from launcher.cache import load_into_cache
from launcher.config import load_config
from launcher.jobs import run_training

POLL_SECONDS = 5


@ray.remote(num_cpus=0)
class Registry:
    def __init__(self):
        self.services = {}

    def register(self, name, address):
        self.services[name] = address

    def lookup(self, name):
        return self.services.get(name)


@ray.remote(num_cpus=0)
class MetricsPoller:
    def __init__(self, endpoint):
        self.endpoint = endpoint
        self.samples = []

    def start(self):
        threading.Thread(target=self._loop, daemon=True).start()
        return True

    def _loop(self):
        while True:
            self.samples.append(time.time())
            time.sleep(POLL_SECONDS)


@ray.remote(num_cpus=1)
class TaskRunner:
    def run(self, config):
        return run_training(config)


@ray.remote
def warm_cache(shard):
    return load_into_cache(shard)


@ray.remote(num_returns=0)
def log_event(message):
    print(message)


@ray.remote
def cleanup(path):
    shutil.rmtree(path, ignore_errors=True)
    return path


def start_services(config):
    Registry.options(name="registry").remote()  # expect: RAY072
    Registry.options(name="registry-backup", lifetime="detached").remote()
    MetricsPoller.remote(config["metrics"])  # expect: RAY072

    poller = MetricsPoller.remote(config["metrics"])
    ray.get(poller.start.remote())
    ok = ray.get(MetricsPoller.remote(config["metrics"]).start.remote())  # expect: RAY072
    return poller, ok


def launch(config):
    ray.init(address="auto")
    poller, ok = start_services(config)
    registry = ray.get_actor("registry")
    registry.register.remote("poller", ok)

    result = ray.get(TaskRunner.remote().run.remote(config))
    TaskRunner.remote().run.remote(config)  # expect: RAY072

    for shard in config["shards"]:
        warm_cache.remote(shard)  # expect: RAY077
    log_event.remote("cache warmed")

    done = cleanup.remote(config["scratch"])  # expect: RAY077
    pending = [cleanup.remote(path) for path in config["old_runs"]]
    ray.wait(pending, num_returns=len(pending))
    return result, poller


if __name__ == "__main__":
    launch(load_config())
