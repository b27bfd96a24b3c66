"""Prometheus gauges of served models' drift (app.core.monitoring), read from Redis at scrape time so that every
API process exposes the same figures. Cardinality is bounded: at most FIRE_DRIFT_METRICS_MODELS models (the last
scored; a tenant's scrape: its own), and of each at most FIRE_DRIFT_METRICS_PER_MODEL rules and as many columns, the
flagged ones first."""

import logging
import math

from prometheus_client.core import GaugeMetricFamily

from app.core.connections import REDIS_FAILURES
from app.core.container import Core
from app.core.errors import Unavailable

log = logging.getLogger(__name__)
MODEL_LABELS = ["tenant", "model", "version"]


class DriftCollector:
    def __init__(self, core: Core):
        self.core = core

    def collect(self, tenant: str | None = None):
        """Every tenant's models (``tenant`` None), or ``tenant``'s own."""
        seconds = self.core.settings.drift_metrics_seconds
        rows = GaugeMetricFamily("fire_drift_rows", f"Rows a model scored in the last {seconds} s", labels=MODEL_LABELS)
        ratio = GaugeMetricFamily(
            "fire_rule_firing_ratio",
            f"A rule's firing rate over the last {seconds} s divided by its rate on the training table",
            labels=[*MODEL_LABELS, "rule"],
        )
        psi = GaugeMetricFamily(
            "fire_feature_psi",
            f"A column's population stability index over the last {seconds} s against the training table",
            labels=[*MODEL_LABELS, "column"],
        )
        drifted = GaugeMetricFamily(
            "fire_drifted",
            "1 for each rule and column the model's drift thresholds flag (GET /v1/models/{id}/monitoring)",
            labels=[*MODEL_LABELS, "kind", "name"],
        )
        try:
            reports = self.core.monitoring.recent_reports(tenant)
        except (*REDIS_FAILURES, Unavailable) as error:
            log.warning("metrics without drift figures: %s", error)
            reports = []
        keep = self.core.settings.drift_metrics_per_model
        for report in reports:
            model = [report.tenant, report.name, str(report.version)]
            rows.add_metric(model, report.rows)
            rules = [(rule, rule.ratio) for rule in report.rules if rule.ratio is not None]
            rules.sort(key=lambda pair: (not pair[0].drifted, -abs(math.log(max(pair[1], 1e-9)))))
            for rule, value in rules[:keep]:
                ratio.add_metric([*model, f"r{rule.rule}"], value)
            columns = [(column, column.psi) for column in report.columns if column.psi is not None]
            columns.sort(key=lambda pair: (not pair[0].drifted, -pair[1]))
            for column, value in columns[:keep]:
                psi.add_metric([*model, column.column], value)
            for rule_id in report.drifted_rules[:keep]:
                drifted.add_metric([*model, "rule", f"r{rule_id}"], 1)
            for name in report.drifted_columns[:keep]:
                drifted.add_metric([*model, "column", name], 1)
        yield from (rows, ratio, psi, drifted)
