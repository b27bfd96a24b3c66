"""Run an exported model: the SQL expression in SQLite, the Python module with exec."""

import sqlite3

import numpy as np
import pandas as pd


def sql_predictions(expression: str, features: pd.DataFrame) -> np.ndarray:
    with sqlite3.connect(":memory:") as connection:
        features.to_sql("abalone", connection, index=False)  # None/NaN stored as NULL
        rows = connection.execute(f"SELECT {expression} FROM abalone ORDER BY rowid").fetchall()
    return np.array([value for (value,) in rows])


def python_predictions(source: str, features: pd.DataFrame) -> np.ndarray:
    namespace: dict = {}
    exec(compile(source, "<export>", "exec"), namespace)
    return np.array([namespace["predict"](row) for row in features.to_dict("records")])
