"""RFC 9457 problem responses as the service's tests expect them."""

PROBLEM = "application/problem+json"


def assert_problem(response, status: int, field_part: str | None = None) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body = response.json()
    assert body["status"] == status and body["title"] and body["detail"]
    if field_part is not None:
        assert any(field_part in error["field"] or field_part in error["message"] for error in body["errors"]), body
        assert all(error["fix"] for error in body["errors"])
    return body
