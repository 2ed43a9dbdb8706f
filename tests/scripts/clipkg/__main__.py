"""`python -m clipkg`: the CLI tests' module target."""

import json
import sys
import time


def package_hot(seconds):
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end:
        n += sum(range(500))
    return n


print("MODULE " + json.dumps({"argv": sys.argv, "name": __name__}), flush=True)
package_hot(0.3)
