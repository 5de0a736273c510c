"""What the binding's tests share: a test case with a temporary data folder and the config of a quick runtime on
it (two workers, short flush and sweep intervals, the offline demo model)."""
import tempfile
import unittest


class RuntimeCase(unittest.TestCase):
    def setUp(self):
        self._dir = tempfile.TemporaryDirectory(prefix="agentrt-py-")
        self.addCleanup(self._dir.cleanup)

    def config(self, **extra):
        cfg = {"data_dir": self._dir.name, "model": {"type": "demo"}, "workers": 2, "flush_interval_ms": 5,
               "sweep_interval_ms": 50}
        cfg.update(extra)
        return cfg
