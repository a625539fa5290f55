/** The eval arrangement lives in common/src/metering so the gateway and admin read and publish it the same way. */
export {
  applyArrangementChange,
  getArrangement,
  INDIVIDUAL_PLAN,
  publishArrangement,
  saveArrangement,
  SELF_SERVE_ARRANGEMENT,
  type Arrangement,
  type ArrangementChange,
} from '@ent/common/metering/arrangement';
