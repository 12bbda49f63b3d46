"""Which columns can hold personal data, declared on each model beside its fields.

Erasure has to find every copy of what a person wrote, or of what is about a subject.
A list of columns inside erasure goes stale the day someone adds a column elsewhere, so
each model says it itself, next to the fields it describes:

    class Note(InProject):
        body = models.TextField()
        kind = models.CharField(max_length=16)

        personal_data = PersonalData(text=("body",), not_personal=("kind",))

A declaration on an abstract base (the chain columns of `ChainedRow`) counts for every
model built on it. What each class means to erasure:

- `text`: a person's text as stored. Erasure verification searches the rows that stay
  for it (a string they still hold proves nothing when found in the files), and for a
  table registered with `owned` a deletion samples it before deleting, to look for after;
- `vectors`: bytes derived from a person's text (an embedding); the first bytes of the
  deleted ones are searched for in the files, and the rows that stay are searched too;
- `not_searched`: personal, goes with its row, but no needle can be cut from it as stored
  (a framework's encoded state, a normal form, a framework's JSON document);
- `not_personal`: nothing a subject's erasure looks for: ids, hashes, enum values, counts,
  and who acted (an account's or key's name, a login's address), kept on purpose.

`tests/test_personal_data.py` fails for a text-like column (char, text, JSON, binary,
file) of a model of ours that no class names: a new column is classified before it ships.
"""

from dataclasses import dataclass

from django.apps import apps
from django.db import models

TEXT_LIKE = (models.CharField, models.TextField, models.JSONField, models.BinaryField, models.FileField)


@dataclass(frozen=True)
class PersonalData:
    text: tuple[str, ...] = ()
    vectors: tuple[str, ...] = ()
    not_searched: tuple[str, ...] = ()
    not_personal: tuple[str, ...] = ()

    def __post_init__(self):
        # A bare string where a tuple was meant ("body" for ("body",)) would declare letters.
        for name in ("text", "vectors", "not_searched", "not_personal"):
            if isinstance(getattr(self, name), str):
                raise TypeError(f"PersonalData.{name} takes a tuple of field names, not a string")

    def __or__(self, other: "PersonalData") -> "PersonalData":
        return PersonalData(text=self.text + other.text, vectors=self.vectors + other.vectors,
                            not_searched=self.not_searched + other.not_searched,
                            not_personal=self.not_personal + other.not_personal)

    @property
    def classified(self) -> tuple[str, ...]:
        return self.text + self.vectors + self.not_searched + self.not_personal


def declared(model) -> PersonalData:
    """The model's declaration, with those of the classes it is built on."""
    found = PersonalData()
    for cls in reversed(model.__mro__):
        own = cls.__dict__.get("personal_data")
        if isinstance(own, PersonalData):
            found = found | own
    return found


def searched_models() -> list[type[models.Model]]:
    """Every concrete model with a column erasure searches (`text` or `vectors`)."""
    return [model for model in apps.get_models()
            if not model._meta.proxy and (declared(model).text or declared(model).vectors)]


def classification_problems(model) -> list[str]:
    """What is wrong with the model's declaration: a text-like column no class names, a name
    that is no column of the model, a column named in two classes."""
    declaration = declared(model)
    columns = {f.name for f in model._meta.concrete_fields}
    label = model._meta.label
    problems = [f"{label}.{f.name} ({type(f).__name__}) is not classified: add it to `personal_data` "
                f"(conversations/personal.py says which class)"
                for f in model._meta.concrete_fields
                if isinstance(f, TEXT_LIKE) and f.name not in declaration.classified]
    problems += [f"{label}.{name} is declared in `personal_data` but is no column of the model"
                 for name in dict.fromkeys(declaration.classified) if name not in columns]
    problems += [f"{label}.{name} is declared in two classes of `personal_data`"
                 for name in dict.fromkeys(declaration.classified) if declaration.classified.count(name) > 1]
    return problems
