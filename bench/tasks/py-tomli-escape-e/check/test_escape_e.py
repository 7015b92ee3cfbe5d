import sys, unittest
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'src'))
import tomli



class Escapes(unittest.TestCase):
    def test_escape_e(self):
        self.assertEqual(tomli.loads('s = "a\\eb"')["s"], "a\x1bb")
        self.assertEqual(tomli.loads('s = """x\\e"""')["s"], "x\x1b")

    def test_others_unchanged(self):
        self.assertEqual(tomli.loads('s = "\\t\\n"')["s"], "\t\n")
        with self.assertRaises(tomli.TOMLDecodeError):
            tomli.loads('s = "\\q"')


if __name__ == "__main__":
    unittest.main()
