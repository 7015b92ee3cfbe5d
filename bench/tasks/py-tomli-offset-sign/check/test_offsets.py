import sys, unittest
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'src'))
import tomli

from datetime import datetime, timedelta, timezone


class Offsets(unittest.TestCase):
    def test_negative_offset(self):
        doc = tomli.loads('t = 1979-05-27T00:32:00-07:00')
        self.assertEqual(doc["t"], datetime(1979, 5, 27, 0, 32, tzinfo=timezone(timedelta(hours=-7))))

    def test_positive_offset(self):
        doc = tomli.loads('t = 1979-05-27T00:32:00+05:30')
        self.assertEqual(doc["t"].utcoffset(), timedelta(hours=5, minutes=30))

    def test_zulu(self):
        self.assertEqual(tomli.loads('t = 1979-05-27T07:32:00Z')["t"].utcoffset(), timedelta(0))


if __name__ == "__main__":
    unittest.main()
