// Runs a Flamenco job type's compileJob under Node as the Manager would, with recorders in place of
// the Manager's `author` module and job: node flamenco_compiler.js JOB_TYPE.js < job.json
// prints {"jobType": JOB_TYPE, "tasks": [{name, type, commands: [{name, parameters}]}]}, or the
// error compileJob threw (exit status 1).
"use strict";
const fs = require("fs");
const nodePath = require("path");
const vm = require("vm");

const author = {
    Task: (name, type) => ({
        name, type, commands: [],
        addCommand(command) { this.commands.push(command); },
    }),
    Command: (name, parameters) => ({ name, parameters }),
};
const path = {
    basename: (p) => nodePath.basename(p),
    dirname: (p) => nodePath.dirname(p),
    join: (...parts) => nodePath.join(...parts),
    stem: (p) => nodePath.basename(p, nodePath.extname(p)),
};
const context = vm.createContext({ author, path, print: (...args) => console.error(...args) });
const source = fs.readFileSync(process.argv[2], "utf8");
const { JOB_TYPE, compileJob } = vm.runInContext(`${source}\n;({ JOB_TYPE, compileJob })`, context);

const job = JSON.parse(fs.readFileSync(0, "utf8"));
const tasks = [];
job.addTask = (task) => tasks.push(task);
try {
    compileJob(job);
} catch (error) {
    console.log(JSON.stringify({ error: String(error) }));
    process.exit(1);
}
console.log(JSON.stringify({
    jobType: JOB_TYPE,
    tasks: tasks.map(({ name, type, commands }) => ({ name, type, commands })),
}));
