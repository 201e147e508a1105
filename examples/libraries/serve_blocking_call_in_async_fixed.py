"""The same deployment pausing with `await asyncio.sleep`, so that the requests' pauses overlap:
ray-lint reports nothing here."""

import asyncio

import ray
from ray import serve


@serve.deployment(max_ongoing_requests=16, ray_actor_options={"num_cpus": 0})
class QuoteService:
    """Prices an order from a partner API that allows one call per `pace_s` per connection."""

    def __init__(self, pace_s: float) -> None:
        self.pace_s = pace_s
        self.prices = {"apple": 0.5, "pear": 0.75, "plum": 0.3}

    async def quote(self, item: str, quantity: int) -> float:
        await asyncio.sleep(self.pace_s)  # the replica serves the other requests during the pause
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
