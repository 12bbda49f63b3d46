"""The OpenAPI document names each answer model once: two models of one name would share one
component, and every answer of the other would be documented (and typed in openapi.ts) wrongly."""

import typing

from pydantic import BaseModel

from memoryui.api import api


def _models(annotation, found: set) -> None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation in found:
            return
        found.add(annotation)
        for field in annotation.model_fields.values():
            _models(field.annotation, found)
    for argument in typing.get_args(annotation):
        _models(argument, found)


def answer_models(ninja_api) -> set[type[BaseModel]]:
    found: set = set()
    for _, router in ninja_api._routers:
        for view in router.path_operations.values():
            for operation in view.operations:
                for model in operation.response_models.values():
                    _models(model, found)
    return found


def test_no_two_answer_models_share_a_name():
    by_name: dict[str, set[str]] = {}
    for model in answer_models(api):
        by_name.setdefault(model.__name__, set()).add(f"{model.__module__}.{model.__qualname__}")
    assert len(by_name) > 40
    assert {name: places for name, places in by_name.items() if len(places) > 1} == {}


def test_a_second_model_of_the_same_name_is_caught():
    class Twin(BaseModel):
        a: int

    first = Twin

    class Twin(BaseModel):  # noqa: F811 (the point: another class, the same name)
        b: int

    holder = BaseModel.__class__("Holder", (BaseModel,), {"__annotations__": {"x": first, "y": Twin}})
    found: set = set()
    _models(holder, found)
    assert sorted(m.__name__ for m in found) == ["Holder", "Twin", "Twin"]
