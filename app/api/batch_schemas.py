"""Bodies of the batch scoring routes (app/api/routes/batch.py)."""

from pydantic import BaseModel, ConfigDict, Field

from app.core.job_documents import JobState


class BatchDatasetRequest(BaseModel):
    """A stored dataset to score (instead of an uploaded file); the options are the query's."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [{"dataset_id": "ds_0123"}]})

    dataset_id: str = Field(description="a dataset of yours (POST /v1/datasets): its rows in their original columns")


class BatchProgressView(BaseModel):
    n_rows: int = Field(description="rows in the input")
    n_chunks: int = Field(description="chunk jobs the rows were split into")
    chunks_done: int
    rows_done: int = Field(description="rows scored so far")
    chunks_failed: int


class BatchLinks(BaseModel):
    self: str
    result: str = Field(description="the scored rows (once the job succeeded)")
    cancel: str
    job: str = Field(description="the job as /v1/jobs sees it")


class BatchView(JobState):
    """A batch scoring job: its record (spec: a BatchJobSpec) with the chunks' progress and links."""

    batch: BatchProgressView
    links: BatchLinks
