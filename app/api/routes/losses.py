from fastapi import APIRouter

from app.core.job_documents import LossView
from solver.losses import LOSSES

router = APIRouter(prefix="/v1/losses", tags=["jobs"])


@router.get(
    "",
    response_model=list[LossView],
    summary="The losses a path may fit, in the library's order; a dataset's task takes the first made for it",
)
def list_losses():
    return [LossView.of(name) for name in LOSSES]
