"""Production rigs: bones that constraints and drivers pose, Rigify's IK/FK switch, body roles by bone name and the user's mapping, and the body's weights for balance."""
