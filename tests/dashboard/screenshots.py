"""Screenshots of the dashboard's pages for the docs (docs/dashboard/*.png), from a real run:

    python -m tests.dashboard.screenshots [FOLDER]

A database with traffic (sends, receives, deletes spread over the last minutes by a fake clock, a
dead-letter queue with poison messages, an audit trail), the dashboard over it, and the system's
headless Chromium taking each page."""

from __future__ import annotations

import argparse
import shutil
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

import durableq
from durableq import dashboard
from tests.conftest import FakeClock

PAGES = {
    "overview": "/",
    "queue": "/queues/orders",
    "dead-letter-queue": "/queues/orders-dlq",
    "audit": "/audit",
    "redrive": "/queues/orders-dlq/redrive",
}


def _traffic(db: Path) -> None:
    start = datetime.now(UTC) - timedelta(minutes=150)
    clock = FakeClock(start.timestamp())
    with durableq.open(db, clock=clock, durability="normal") as broker:
        broker.create_queue("orders-dlq")
        policy = durableq.RedrivePolicy("orders-dlq", 3)
        orders = broker.create_queue("orders", history=True, redrive_policy=policy, visibility_timeout=5)
        emails = broker.create_queue("emails")
        payments = broker.create_queue("payments.fifo", fifo=True)
        payments.send("charge 42", group_id="customer-7", deduplication_id="charge-42")
        for minute in range(150):
            busy = 20 + int(15 * abs(((minute % 60) - 30) / 30))
            for i in range(busy):
                orders.send(f"order {minute}-{i}", attributes={"region": "eu"})
                emails.send(f"email {minute}-{i}")
            for message in orders.receive(max_messages=10) + orders.receive(max_messages=10):
                if minute % 17 or message.receive_count > 1:
                    orders.delete(message.receipt_handle)
            for message in emails.receive(max_messages=10):
                emails.delete(message.receipt_handle)
            orders.receive(max_messages=1)
            clock.advance(60)
        orders.set_attributes(visibility_timeout=30)
        emails.purge()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("folder", nargs="?", default="docs/dashboard", type=Path)
    out = parser.parse_args().folder
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        db = Path(scratch) / "shop.db"
        _traffic(db)
        options = webdriver.ChromeOptions()
        options.binary_location = shutil.which("chromium") or "chromium"
        for argument in ("--headless=new", "--no-sandbox", "--window-size=1280,900", "--hide-scrollbars"):
            options.add_argument(argument)
        chrome = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))
        try:
            with dashboard.start(db, port=0) as running:
                chrome.get(running.url)
                base = running.url.split("?")[0].rstrip("/")
                for name, path in PAGES.items():
                    chrome.get(base + path)
                    chrome.save_screenshot(str(out / f"{name}.png"))
                chrome.get(base + "/queues/orders")
                chrome.find_element(By.CSS_SELECTOR, "table.messages a").click()
                chrome.save_screenshot(str(out / "message.png"))
        finally:
            chrome.quit()
    print(f"screenshots in {out}")


if __name__ == "__main__":
    main()
