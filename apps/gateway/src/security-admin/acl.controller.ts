import { Body, Controller, Delete, Get, HttpCode, Param, Post } from '@nestjs/common';
import { AclAdmin, AclRuleView, Caller } from '@libs/security';
import { CallerParam, GateRoute } from '../http/gate-route';
import { z } from 'zod';
import { ApiRoute, errors, GATED } from '../http/api-route';
import { aclRuleBodySchema, aclRuleViewSchema } from '../http/api-schemas';

/** The ACL rules of the caller's tenant (libs/security/acl-admin.ts; docs/security.md). */
@Controller('admin/acl/rules')
@GateRoute({ action: 'admin', admin: true })
export class AclController {
  constructor(private readonly acl: AclAdmin) {}

  @Get()
  @ApiRoute({
    summary: "The caller tenant's ACL rules",
    tags: ['admin'],
    responses: { 200: { description: 'the rules', schema: z.array(aclRuleViewSchema) }, ...GATED },
  })
  list(@CallerParam() caller: Caller): Promise<AclRuleView[]> {
    return this.acl.list(caller);
  }

  @Post()
  @ApiRoute({
    summary: 'Add an ACL rule',
    tags: ['admin'],
    body: { schema: aclRuleBodySchema },
    responses: { 201: { description: 'the rule', schema: aclRuleViewSchema }, ...errors(400), ...GATED },
  })
  @HttpCode(201)
  add(@CallerParam() caller: Caller, @Body() body: unknown): Promise<AclRuleView> {
    return this.acl.add(caller, body);
  }

  @Delete(':id')
  @ApiRoute({
    summary: 'Delete an ACL rule',
    tags: ['admin'],
    params: { id: 'the rule id' },
    responses: { 204: { description: 'deleted' }, ...errors(404), ...GATED },
  })
  @HttpCode(204)
  async delete(@CallerParam() caller: Caller, @Param('id') id: string): Promise<void> {
    await this.acl.delete(caller, id);
  }
}
