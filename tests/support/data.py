"""The small tables that ship in tests/data (gzipped CSV, target last) and the paths tests need."""

import gzip
import io
from pathlib import Path

import pandas as pd

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = REPO_ROOT / "tests" / "data"
ABALONE = DATA / "abalone.csv.gz"  # 4,177 rows; text column Sex; target rings
KIN8NM = DATA / "kin8nm_2000.csv.gz"  # target y
ELEVATORS = DATA / "elevators_3000.csv.gz"  # target Goal
CALIFORNIA = DATA / "california_housing_3000.csv.gz"  # target MedHouseVal
# the first row of ABALONE without its target, as a scoring body's record
FIRST_ABALONE_ROW = {
    "Sex": "M",
    "Length": 0.455,
    "Diameter": 0.365,
    "Height": 0.095,
    "Whole_weight": 0.514,
    "Shucked_weight": 0.2245,
    "Viscera_weight": 0.101,
    "Shell_weight": 0.15,
}


def abalone_frame():
    return pd.read_csv(io.BytesIO(gzip.decompress(ABALONE.read_bytes())))
