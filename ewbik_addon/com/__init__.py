"""What every part of the glue shares: checks on the armature object, the settings stored on it and its bones, the active selection, the words of messages, rotation and pose channels."""
