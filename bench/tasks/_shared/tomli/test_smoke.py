import sys, unittest
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'src'))
import tomli



class Smoke(unittest.TestCase):
    def test_loads(self):
        doc = tomli.loads('[a]\nb = [1, 2.5, "x", {c = 1979-05-27}]\nd = """\nm"""')
        self.assertEqual(doc["a"]["b"][0], 1)
        self.assertEqual(doc["a"]["d"], "m")
        with self.assertRaises(tomli.TOMLDecodeError):
            tomli.loads("a = ")


if __name__ == "__main__":
    unittest.main()
