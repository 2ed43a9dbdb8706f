"""An ended thread's last greenlet under --greenlets (tests/test_greenlet_census.py): prints
"freed" when it is gone some censuses after the thread ended, "kept" when it is not."""

import gc
import threading
import time
import weakref

import greenlet

import spprof

spprof.start(mode="wall", greenlets=True)
refs = []


def work():
    g = greenlet.greenlet(lambda: greenlet.getcurrent().parent.switch())
    g.switch()  # the thread's last switch: back to its main greenlet
    refs.append(weakref.ref(greenlet.getcurrent()))


t = threading.Thread(target=work)
t.start()
t.join()
time.sleep(0.3)  # censuses every 50 ms
gc.collect()
print("freed" if refs[0]() is None else "kept")
spprof.stop()
