import { Body, Controller, Delete, Get, HttpCode, Param, Post } from '@nestjs/common';
import { AclAdmin, AclRuleView, Caller } from '../../../libs/security';
import { CallerParam, GateRoute } from './gate-route';

/** The ACL rules of the caller's tenant (libs/security/acl-admin.ts; docs/security.md). */
@Controller('admin/acl/rules')
@GateRoute({ action: 'admin', admin: true })
export class AclController {
  constructor(private readonly acl: AclAdmin) {}

  @Get()
  list(@CallerParam() caller: Caller): Promise<AclRuleView[]> {
    return this.acl.list(caller);
  }

  @Post()
  @HttpCode(201)
  add(@CallerParam() caller: Caller, @Body() body: unknown): Promise<AclRuleView> {
    return this.acl.add(caller, body);
  }

  @Delete(':id')
  @HttpCode(204)
  async delete(@CallerParam() caller: Caller, @Param('id') id: string): Promise<void> {
    await this.acl.delete(caller, id);
  }
}
