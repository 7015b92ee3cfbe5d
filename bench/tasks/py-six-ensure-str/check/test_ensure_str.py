import sys, unittest
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
import six



class EnsureStr(unittest.TestCase):
    def test_bytes_decode_with_the_encoding(self):
        self.assertEqual(six.ensure_str("caf\u00e9".encode("utf-8")), "caf\u00e9")
        self.assertEqual(six.ensure_str(b"\xe9", encoding="latin-1"), "\u00e9")

    def test_text_and_errors(self):
        self.assertEqual(six.ensure_str("x"), "x")
        self.assertEqual(six.ensure_str(b"a\xff", errors="replace"), "a\ufffd")
        with self.assertRaises(TypeError):
            six.ensure_str(3)


if __name__ == "__main__":
    unittest.main()
