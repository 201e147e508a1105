"""A Ray Serve deployment whose async method pauses with `time.sleep`: `ray-lint check examples/`
reports the RAY222 below, and `ray-lint verify examples/libraries/serve_blocking_call_in_async.py` runs the
rule's model of it and measures the cost."""

import time

import ray
from ray import serve


@serve.deployment(max_ongoing_requests=16, ray_actor_options={"num_cpus": 0})
class QuoteService:
    """Prices an order from a partner API that allows one call per `pace_s` per connection."""

    def __init__(self, pace_s: float) -> None:
        self.pace_s = pace_s
        self.prices = {"apple": 0.5, "pear": 0.75, "plum": 0.3}

    async def quote(self, item: str, quantity: int) -> float:
        time.sleep(self.pace_s)  # RAY222: holds the replica's event loop, so every other request waits
        return round(self.prices.get(item, 1.0) * quantity, 2)


app = QuoteService.bind(0.05)


if __name__ == "__main__":
    ray.init()
    serve.start(proxy_location="Disabled")
    try:
        handle = serve.run(app, name="quotes", route_prefix=None)
        responses = [handle.quote.remote(item, 10) for item in ("apple", "pear", "plum") * 4]
        print([response.result(timeout_s=30) for response in responses])
    finally:
        serve.shutdown()
