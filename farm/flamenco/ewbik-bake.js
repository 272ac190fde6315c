// Flamenco job type "ewbik-bake": bakes EWBIK shots, one task per .blend file, each running
//   {blender} {blenderArgs} -b -c ewbik bake FILE.blend [options]
// on a Worker whose Blender has the EWBIK extension installed. The Manager loads it from the
// `scripts` folder next to its executable.

const JOB_TYPE = {
    label: "EWBIK Bake",
    settings: [
        { key: "shots", type: "string", required: true,
          description: "The .blend files to bake, separated by ';': one task each" },
        { key: "frames", type: "string", default: "",
          description: "Frames to bake, START-END; empty bakes each scene's frame range" },
        { key: "step", type: "int32", default: 1, propargs: { min: 1 },
          description: "Solve every Nth frame" },
        { key: "armatures", type: "string", default: "",
          description: "Names of the armatures to bake, separated by ','; empty bakes every pinned armature" },
        { key: "keys_only", type: "bool", default: false,
          description: "Solve only the frames the targets hold keys on" },
        { key: "tolerance_mm", type: "float", default: 0, propargs: { min: 0 },
          description: "Largest miss of a pin, in millimetres, that passes; 0 keeps the command's own" },
        { key: "output_dir", type: "string", subtype: "dir_path", default: "",
          description: "Where the baked files are written; empty writes each file back in place" },
    ],
};

function compileJob(job) {
    const settings = job.settings;
    const shots = separated(settings.shots, ";");
    if (shots.length == 0) {
        throw "shots: name at least one .blend file";
    }
    const options = bakeOptions(settings);
    for (const shot of shots) {
        const task = author.Task(`bake ${path.basename(shot)}`, "blender");
        task.addCommand(author.Command("blender-render", {
            exe: "{blender}",
            exeArgs: "{blenderArgs}",
            argsBefore: ["-b", "-c", "ewbik", "bake"],
            blendfile: shot,
            args: options,
        }));
        job.addTask(task);
    }
}

// The bake command's options after the file, from the job's settings; unset ones are left out.
function bakeOptions(settings) {
    const options = ["--step", String(settings.step || 1)];
    if (settings.frames) {
        options.push("--frames", settings.frames.trim());
    }
    for (const name of separated(settings.armatures, ",")) {
        options.push("--armature", name);
    }
    if (settings.keys_only) {
        options.push("--keys-only");
    }
    if (settings.tolerance_mm > 0) {
        options.push("--tolerance", String(settings.tolerance_mm));
    }
    if (settings.output_dir) {
        options.push("--output-dir", settings.output_dir);
    }
    return options;
}

// The non-empty entries of a setting that lists several values, trimmed.
function separated(text, separator) {
    return (text || "").split(separator).map((entry) => entry.trim()).filter((entry) => entry != "");
}
