import { TextField, type TextFieldProps } from '../../components/TextField.tsx';
import { PASSWORD_MAX, PASSWORD_MIN } from './password-rules.ts';

/** The account fields of the sign-up, sign-in, join and password forms, with the browser's autofill hints. */
type AccountFieldProps = Omit<TextFieldProps, 'label' | 'type'>;

export const EmailField = (props: AccountFieldProps) => (
  <TextField label="Email" type="email" required autoComplete="email" {...props} />
);

export const NameField = (props: AccountFieldProps) => (
  <TextField label="Your name" autoComplete="name" {...props} />
);

/** A password the browser may fill in from what it saved. */
export const CurrentPasswordField = ({
  label = 'Password',
  ...props
}: AccountFieldProps & { label?: string }) => (
  <TextField label={label} type="password" autoComplete="current-password" {...props} />
);

/** A password being chosen: the browser may suggest one, and the hint states the rules checked on submit. */
export const NewPasswordField = ({
  label = 'Password',
  ...props
}: AccountFieldProps & { label?: string }) => (
  <TextField
    label={label}
    type="password"
    autoComplete="new-password"
    hint={`${PASSWORD_MIN} to ${PASSWORD_MAX} characters.`}
    {...props}
  />
);
