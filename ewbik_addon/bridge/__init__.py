"""The armature as the solver sees it: cached solver objects, pins and their targets, pose channels in and out, the pose underneath every solve."""
