import os
import sys
import tempfile

# A cache private to the test run (shared by xdist workers), so tests build what they test.
os.environ.setdefault("ONNXC_CACHE_DIR", os.path.join(tempfile.gettempdir(), f"onnxc-test-cache-{os.getuid()}"))
sys.path.insert(0, os.path.dirname(__file__))
