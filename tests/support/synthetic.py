"""Small synthetic tables of the kinds issue 17 brought in, made here (seeded) so that no test needs data from
outside the repository: a text-labelled seven-class target and a count target, each with a text column and
missing values; a target that follows 0/1, 1/2 and true/false columns; and a PNG image (a file that is no table)."""

import struct
import zlib

import numpy as np
import pandas as pd

GRADES = ["A", "B", "C", "D", "E", "F", "G"]


def grades_table(n_rows: int = 700, seed: int = 0) -> pd.DataFrame:
    """Seven text grades A..G that follow size and region, with noise; a text column and missing scores."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "size": rng.uniform(0, 10, n_rows).round(2),
            "age": rng.integers(18, 80, n_rows),
            "region": rng.choice(["north", "south", "east", "west"], n_rows),
            "score": rng.normal(0, 1, n_rows).round(3),
        }
    )
    frame.loc[rng.choice(n_rows, 30, replace=False), "score"] = np.nan
    shift = (frame["region"] == "north").astype(int) - (frame["region"] == "south").astype(int)
    code = np.clip((frame["size"] // 1.5).astype(int) + shift + rng.integers(-1, 2, n_rows), 0, 6)
    frame["grade"] = np.array(GRADES)[code]
    return frame


def visits_table(n_rows: int = 800, seed: int = 1) -> pd.DataFrame:
    """Counts of visits whose rate grows with chronic conditions and age and differs by insurance."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "age": rng.integers(20, 90, n_rows),
            "chronic": rng.integers(0, 5, n_rows),
            "insurance": rng.choice(["none", "public", "private"], n_rows),
            "income": rng.lognormal(3, 0.5, n_rows).round(1),
        }
    )
    frame.loc[rng.choice(n_rows, 25, replace=False), "income"] = np.nan
    log_rate = -1.0 + 0.45 * frame["chronic"] + 0.015 * (frame["age"] - 20) + 0.5 * (frame["insurance"] == "private")
    frame["visits"] = rng.poisson(np.exp(log_rate))
    return frame


def smokers_table(n_rows: int = 600, seed: int = 0) -> pd.DataFrame:
    """A target y that follows smoker (0/1) and sex (1/2) strongly and age weakly; insured (true/false) and region (a
    text column, so that the table is inferred as a table) are noise."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "smoker": rng.integers(0, 2, n_rows),
            "sex": rng.integers(1, 3, n_rows),
            "age": rng.uniform(20, 70, n_rows).round(1),
            "region": rng.choice(["north", "south"], n_rows),
            "insured": rng.integers(0, 2, n_rows).astype(bool),
        }
    )
    frame["y"] = 4.0 * frame["smoker"] - 3.0 * (frame["sex"] == 2) + 0.05 * frame["age"] + rng.normal(0, 0.5, n_rows)
    return frame


def png_image() -> bytes:
    """A 2x2 black PNG image."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 14)) + chunk(b"IEND", b"")
    )
