"""The one root of every refusal the product raises, in the solver and in Blender.

A refusal names what is wrong (`field`: a setting, a bone, a path into a scene document, an
argument) and says what is wrong with it (`reason`, without the field), so callers and tests tell
refusals apart by type and field and the user reads where to look. It is a `ValueError`: bad
input is a bad value, and callers that catch `ValueError` keep working.
"""


class EwbikError(ValueError):
    """Bad input to the product. `field` names the offending value, `reason` what is wrong with it;
    `str()` is the message the user reads: `message` when the sentence names the field in words of
    its own ("'Armature' is in Edit Mode: leave it first"), else "<field>: <reason>"."""

    def __init__(self, field: str, reason: str, message: str | None = None) -> None:
        super().__init__(f"{field}: {reason}" if message is None else message)
        self.field = field
        self.reason = reason
