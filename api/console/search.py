"""The search playground: a query for a user, with `as_of` and scoring overrides,
showing each hit's score parts and what the similarity floor dropped.

A GET form, so a search is a link one can share; htmx swaps only the results.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from api.console.auth import ReadViewer
from api.console.routing import ConsoleRoute
from api.console.templating import render
from api.deps import StateDep
from memwell.intake.turns import AwareInstant
from memwell.retrieval.explain import explain_search
from memwell.retrieval.search import K_MAX, WEIGHT_MAX, Overrides

router = APIRouter(prefix="/console", route_class=ConsoleRoute, include_in_schema=False)


#: an empty form field is no value: the setting applies
_BLANK = BeforeValidator(lambda value: None if value == "" else value)
_Weight = Annotated[float, Field(ge=0, le=WEIGHT_MAX)]


class Playground(BaseModel):
    """The form; an empty field keeps the setting."""

    model_config = ConfigDict(extra="ignore")

    user: str = Field(default="", max_length=200)
    q: str = Field(default="", max_length=2000)
    k: int = Field(default=10, ge=1, le=K_MAX)
    as_of: Annotated[AwareInstant | None, _BLANK] = None
    w_rel: Annotated[_Weight | None, _BLANK] = None
    w_imp: Annotated[_Weight | None, _BLANK] = None
    w_rec: Annotated[_Weight | None, _BLANK] = None
    w_ent: Annotated[_Weight | None, _BLANK] = None
    floor: Annotated[Annotated[float, Field(ge=-1, le=1)] | None, _BLANK] = None
    fusion: Literal["", "rrf", "score", "vector"] = ""

    def overrides(self) -> Overrides:
        return Overrides(
            w_relevance=self.w_rel, w_importance=self.w_imp, w_recency=self.w_rec,
            similarity_floor=self.floor, fusion=self.fusion or None, entity_weight=self.w_ent,
        )  # fmt: skip


@router.get("/search")
async def search_page(
    request: Request, state: StateDep, viewer: ReadViewer, form: Annotated[Playground, Query()]
) -> Response:
    explanation = None
    if form.user and form.q.strip():
        explanation = await explain_search(
            state.retrieval, tenant=viewer.tenant, user_id=form.user, query=form.q, k=form.k,
            as_of=form.as_of, overrides=form.overrides(),
        )  # fmt: skip
    # htmx asks for the results only; a plain request (or a shared link) gets the page.
    template = "search_results.html" if request.headers.get("hx-request") else "search.html"
    return render(request, template, viewer, form=form, result=explanation)
