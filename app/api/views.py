"""How stored records are shown to clients."""

_HIDDEN_JOB_FIELDS = {"rq_job_id", "continuation", "queue"}


def job_view(record: dict) -> dict:
    view = {k: v for k, v in record.items() if k not in _HIDDEN_JOB_FIELDS}
    base = f"/v1/jobs/{record['id']}"
    view["links"] = {"self": base, "events": f"{base}/events", "cancel": f"{base}/cancel",
                     "result": f"{base}/result"}
    return view
