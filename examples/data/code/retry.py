"""Retry helper used by the Acme command-line client."""

import random
import time


def retry(call, attempts=5, base_delay=0.5):
    """Call `call()` until it succeeds, waiting with exponential backoff and jitter between attempts.

    Raises the last exception when every attempt failed.
    """
    for attempt in range(attempts):
        try:
            return call()
        except ConnectionError:
            if attempt == attempts - 1:
                raise
            time.sleep(base_delay * 2**attempt * (1 + random.random()))


class UploadSession:
    """Uploads a large file in 64 MiB parts; `resume()` continues an interrupted upload."""

    PART_SIZE = 64 * 1024 * 1024

    def __init__(self, path, bucket):
        self.path = path
        self.bucket = bucket
        self.done_parts = set()

    def resume(self):
        """Upload only the parts that are not yet on the server."""
