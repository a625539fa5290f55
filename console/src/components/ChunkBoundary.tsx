import { Component, type ReactNode } from 'react';

/**
 * Around a page loaded on demand: when its code cannot be loaded (a tab left open across a new build, the network
 * gone), the page says so and offers a reload, where React would unmount the whole console to a blank page.
 */
export class ChunkBoundary extends Component<{ children: ReactNode }, { failed: boolean }> {
  override state = { failed: false };

  static getDerivedStateFromError(): { failed: boolean } {
    return { failed: true };
  }

  override render(): ReactNode {
    if (!this.state.failed) return this.props.children;
    return (
      <div className="panel" role="alert">
        <p>This page could not be loaded: the console may have been updated since this tab opened.</p>
        <button type="button" className="button button-primary" onClick={() => window.location.reload()}>
          Reload
        </button>
      </div>
    );
  }
}
