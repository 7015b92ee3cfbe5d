import sys, unittest
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
import six



class EnsureStrList(unittest.TestCase):
    def test_mixed(self):
        self.assertEqual(six.ensure_str_list([b"a", "b", bytearray(b"c") if False else b"c"]), ["a", "b", "c"])
        self.assertEqual(six.ensure_str_list(iter([b"\xe9"]), encoding="latin-1"), ["\u00e9"])
        self.assertEqual(six.ensure_str_list([]), [])

    def test_bad_item(self):
        with self.assertRaises(TypeError):
            six.ensure_str_list(["a", 1])

    def test_exported(self):
        self.assertTrue(callable(six.ensure_str_list))


if __name__ == "__main__":
    unittest.main()
