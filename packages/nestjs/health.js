// `@eventmesh/nestjs/health`: the terminus health indicator, apart from the main entry so that @nestjs/terminus stays optional.
module.exports = require('./dist/health/event-mesh.health');
