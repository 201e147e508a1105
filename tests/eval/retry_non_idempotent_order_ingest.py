"""An order-ingestion job that writes to Postgres, Redis and email from Ray tasks (RAY074 retry-non-idempotent).

Reported: a task with exception retries that inserts rows, a task with explicit retries that
increments a Redis counter, a task that emails customers with retries, and an actor method with
task retries that appends rows.
Silent: an upsert, a task with retries off, a plain status update, an S3 overwrite, a task with
only the default retries, and an actor without task retries.
"""

import smtplib

import boto3
import psycopg2
import ray
import redis
from orders.model import Order, parse_orders

DSN = "postgresql://orders@db/orders"
INSERT_ORDER = "INSERT INTO orders (id, customer, total) VALUES (%s, %s, %s)"
UPSERT_TOTALS = """
    INSERT INTO totals (customer, total) VALUES (%s, %s)
    ON CONFLICT (customer) DO UPDATE SET total = excluded.total
"""


@ray.remote(retry_exceptions=True)
def store_order(order: Order):
    with psycopg2.connect(DSN) as conn, conn.cursor() as cursor:
        cursor.execute(INSERT_ORDER, (order.id, order.customer, order.total))  # expect: RAY074
        cursor.execute("UPDATE customers SET last_order = %s WHERE id = %s", (order.id, order.customer))
    return order.id


@ray.remote(retry_exceptions=True)
def store_totals(customer, total):
    with psycopg2.connect(DSN) as conn, conn.cursor() as cursor:
        cursor.execute(UPSERT_TOTALS, (customer, total))
    return customer


@ray.remote(max_retries=0, retry_exceptions=True)
def store_audit(order: Order):
    with psycopg2.connect(DSN) as conn, conn.cursor() as cursor:
        cursor.execute("INSERT INTO audit (order_id) VALUES (%s)", (order.id,))


@ray.remote(max_retries=5)
def count_items(order: Order):
    client = redis.Redis(host="cache")
    for item in order.items:
        client.hincrby("items", item.sku, item.quantity)  # expect: RAY074
    return len(order.items)


@ray.remote(max_retries=2, retry_exceptions=[ConnectionError])
def confirm(order: Order, message):
    with smtplib.SMTP("mail.internal") as smtp:
        smtp.send_message(message)  # expect: RAY074
    return order.id


@ray.remote(retry_exceptions=True)
def archive(order: Order, payload: bytes):
    s3 = boto3.client("s3")
    s3.put_object(Bucket="orders-archive", Key=f"{order.id}.json", Body=payload)
    return order.id


@ray.remote
def mark_seen(order: Order):
    with psycopg2.connect(DSN) as conn, conn.cursor() as cursor:
        cursor.execute("INSERT INTO seen (order_id) VALUES (%s)", (order.id,))


@ray.remote(max_restarts=3, max_task_retries=2)
class EventLog:
    def __init__(self):
        self.conn = psycopg2.connect(DSN)

    def append(self, order_id, event):
        with self.conn.cursor() as cursor:
            cursor.execute("insert into events (order_id, event) values (%s, %s)", (order_id, event))  # expect: RAY074
        self.conn.commit()


@ray.remote
class Mailer:
    def send(self, message):
        with smtplib.SMTP("mail.internal") as smtp:
            smtp.send_message(message)


def ingest(batch_path):
    orders = parse_orders(batch_path)
    log = EventLog.remote()
    mailer = Mailer.remote()
    ids = ray.get([store_order.remote(o) for o in orders])
    ray.get([count_items.remote(o) for o in orders])
    ray.get([store_totals.remote(o.customer, o.total) for o in orders])
    ray.get([store_audit.remote(o) for o in orders])
    ray.get([archive.remote(o, o.to_json()) for o in orders])
    ray.get([mark_seen.remote(o) for o in orders])
    ray.get([log.append.remote(i, "stored") for i in ids])
    ray.get([confirm.remote(o, o.confirmation()) for o in orders])
    ray.get(mailer.send.remote(f"{len(ids)} orders stored"))
    return ids
