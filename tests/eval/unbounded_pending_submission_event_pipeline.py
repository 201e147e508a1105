"""An event pipeline: a consumer loop that scores events with tasks and writes them to a sink actor."""

import itertools
import json
import time

import ray
from kafka import KafkaConsumer

MAX_IN_FLIGHT = 64


@ray.remote
def score(event: dict) -> float:
    return float(len(json.dumps(event)))


@ray.remote
class Sink:
    def __init__(self) -> None:
        self.rows: list[dict] = []

    def write(self, row: dict) -> None:
        self.rows.append(row)

    def size(self) -> int:
        return len(self.rows)


@ray.remote(max_pending_calls=500)
class BoundedSink:
    def __init__(self) -> None:
        self.rows: list[dict] = []

    def write(self, row: dict) -> None:
        self.rows.append(row)


def consume_forever(topic: str) -> None:
    consumer = KafkaConsumer(topic, bootstrap_servers="kafka:9092")
    scores = []
    for message in consumer:
        event = json.loads(message.value)
        scores.append(score.remote(event))  # expect: RAY012


def consume_with_backpressure(topic: str) -> None:
    consumer = KafkaConsumer(topic, bootstrap_servers="kafka:9092")
    in_flight = []
    for message in consumer:
        if len(in_flight) >= MAX_IN_FLIGHT:
            done, in_flight = ray.wait(in_flight, num_returns=1)
            print(ray.get(done[0]))
        in_flight.append(score.remote(json.loads(message.value)))


def tick_forever(source) -> None:
    by_tick = {}
    for tick in itertools.count():
        by_tick[tick] = score.remote(source.read())  # expect: RAY012


def poll_once_a_minute(source) -> None:
    while True:
        event = source.read()
        if event is None:
            break
        print(ray.get(score.remote(event)))
        time.sleep(60)


def backfill(sink) -> None:
    for i in range(20000):
        sink.write.remote({"id": i})  # expect: RAY012


def backfill_bounded() -> None:
    sink = BoundedSink.remote()
    for i in range(20000):
        sink.write.remote({"id": i})  # expect: RAY020


def backfill_in_batches(sink) -> None:
    for start in range(0, 20000, 1000):
        refs = [sink.write.remote({"id": i}) for i in range(start, start + 1000)]
        ray.get(refs)


def small_batch() -> list[float]:
    refs = [score.remote({"id": i}) for i in range(100)]
    return ray.get(refs)


def main() -> None:
    sink = Sink.remote()
    backfill_in_batches(sink)
    print(ray.get(sink.size.remote()))
    print(small_batch())


if __name__ == "__main__":
    main()
